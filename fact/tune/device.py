"""What the tuner needs to know about a GPU without touching one: a device profile.

Profiles feed the candidate rules (shared-memory capacity) and the analytic ranking (SM count,
peak rates, bandwidth). `detect()` reads the present GPU through torch; the presets serve CPU
tests and planning for a GPU that is not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fact.core.enums import Arch


@dataclass(frozen=True)
class DeviceProfile:
    """A GPU as the tuner sees it.

    peak_tflops: dense rate by math path (tensorop = bf16/fp16, tf32, 3xtf32, simt) for the
    architecture's native instructions; sm80 (mma.sync) kernels on a newer GPU run at
    `legacy_factor` of it. smem_per_block: the opt-in dynamic shared memory limit of one block.
    """

    name: str
    arch: Arch
    sms: int
    smem_per_block: int
    bandwidth_gbs: float
    peak_tflops: dict[str, float] = field(default_factory=dict)
    legacy_factor: float = 1.0
    matmul_heuristics_preset: str = ""  # nvidia-matmul-heuristics' GPU preset name, where it has one

    def peak(self, math: str, family_arch: Arch) -> float:
        rate = self.peak_tflops.get(math, 1.0)
        return rate * (self.legacy_factor if family_arch is not self.arch else 1.0)


H100_SXM = DeviceProfile("NVIDIA H100 80GB HBM3", Arch.SM90, 132, 232448, 3350.0,
                         {"tensorop": 989.0, "tf32": 494.0, "3xtf32": 165.0, "simt": 67.0},
                         legacy_factor=0.55, matmul_heuristics_preset="H100_SXM")
H200 = DeviceProfile("NVIDIA H200", Arch.SM90, 132, 232448, 4800.0,
                     {"tensorop": 989.0, "tf32": 494.0, "3xtf32": 165.0, "simt": 67.0},
                     legacy_factor=0.55, matmul_heuristics_preset="H200_SXM")
A100_SXM = DeviceProfile("NVIDIA A100-SXM4-80GB", Arch.SM80, 108, 166912, 2039.0,
                         {"tensorop": 312.0, "tf32": 156.0, "3xtf32": 52.0, "simt": 19.5},
                         matmul_heuristics_preset="A100_SXM_80GB")
PRESETS = {p.name: p for p in (H100_SXM, H200, A100_SXM)}


def detect(index: int = 0) -> DeviceProfile:
    """The profile of CUDA device `index` (imports torch; needs a GPU).

    Unknown GPUs get the nearest preset's rates with their own name, SM count and limits.
    """
    import torch

    props = torch.cuda.get_device_properties(index)
    arch = Arch.from_capability(props.major, props.minor)
    base = next((p for p in PRESETS.values() if p.name == props.name), None)
    if base is None:
        base = H100_SXM if arch is Arch.SM90 else A100_SXM
    smem = int(getattr(props, "shared_memory_per_block_optin", base.smem_per_block))
    return DeviceProfile(props.name, arch, int(props.multi_processor_count), smem, base.bandwidth_gbs,
                         dict(base.peak_tflops), base.legacy_factor, base.matmul_heuristics_preset)


__all__ = ["A100_SXM", "H100_SXM", "H200", "PRESETS", "DeviceProfile", "detect"]
