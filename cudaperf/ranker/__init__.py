"""Stage 1 of the method: the offline pairwise ranker over structural features (PAPER-SPEC §3)."""
