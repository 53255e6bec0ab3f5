"""Stage 2 rewards: R_ver from the harness's result, R_str from the ranker, presets, and trainer adapters."""
