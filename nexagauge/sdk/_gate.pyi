"""Types of the optional C extension ``nexagauge/sdk/_gate.c`` (see its header)."""

def lean(texts: list[str], plans: tuple[object, ...], keyed: int, windows: frozenset[bytes]) -> int:
    """3 / 1: clean (and plain / not); 0: a text is not UTF-8; -1: the Python gate decides."""
