"""Thread verbs that write: delete, prune, copy, update state; run delete and bulk cancel."""
