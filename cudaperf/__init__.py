"""cudaperf: train and evaluate models that turn sequential programs into fast, correct CUDA."""
__version__ = "0.1.0"
