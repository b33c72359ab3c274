def format_duration(seconds):
    """Formats a number of seconds as "2 h 5 min", "3 min 20 s" or "45 s"."""
    seconds = int(seconds)
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if seconds >= 3600:
        return f"{hours} h {minutes} min"
    if seconds >= 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"
