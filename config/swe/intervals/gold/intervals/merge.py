def merge(intervals):
    """Merges overlapping closed intervals [(start, end), ...] into a sorted list."""
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def total_length(intervals):
    """Total length covered by the intervals, overlaps counted once."""
    return sum(end - start for start, end in merge(intervals))
