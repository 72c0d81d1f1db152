"""Stage 0, capture: a module plus example inputs becomes an fx graph whose every tensor
node carries a TensorSpec (shape, dtype, strides, device)."""

from fact.capture.trace import CapturedGraph, capture, example_inputs_from_specs

__all__ = ["CapturedGraph", "capture", "example_inputs_from_specs"]
