"""The built-in C->CUDA dataset: parametric task families, their CUDA variants, and their measurements."""
