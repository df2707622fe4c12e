"""drift: a configuration drift and provenance tracker.

Record what a deployment looks like every minute; when it breaks, ask what
changed since it last worked and where each change came from.
"""

__version__ = "0.1.0"
