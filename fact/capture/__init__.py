"""Stage 0, capture: a module plus example inputs becomes an fx graph whose every tensor
node carries a TensorSpec (shape, dtype, strides, device)."""

from fact.capture.trace import (
    CapturedGraph,
    CaptureError,
    capture,
    example_inputs_from_specs,
    inputs_from_factory,
    mode_is_fixed,
    opaque_modules,
    trains,
)

__all__ = ["CaptureError", "CapturedGraph", "capture", "example_inputs_from_specs", "inputs_from_factory",
           "mode_is_fixed", "opaque_modules", "trains"]
