"""The android domain: listed with the reason it cannot run here, never faked with a simulated phone."""

from agentworld.domains import EnvUnavailable
from agentworld.domains.base import Domain

ANDROID_NEEDS = ("emulator", "adb")


def probe() -> tuple[bool, str]:
    """Android needs the SDK emulator, adb, hardware virtualisation (KVM) and a system image.

    None of these can be installed from PyPI or Debian here, so the domain is listed with the
    reason instead of pretending with a simulated phone.
    """
    import shutil
    from pathlib import Path

    missing = [tool for tool in ANDROID_NEEDS if shutil.which(tool) is None]
    if missing or not Path("/dev/kvm").exists():
        what = ", ".join(
            [
                *(f"'{t}' not on PATH" for t in missing),
                *([] if Path("/dev/kvm").exists() else ["/dev/kvm absent (no hardware virtualisation)"]),
            ]
        )
        return False, (
            f"no Android emulator can run on this machine: {what}; it needs the Android SDK "
            "emulator with a system image (AVD) on a host with KVM"
        )
    return False, "Android SDK found, but no AgentWorld adapter for the Android emulator exists yet"


def factory(sandbox_params: object = None) -> object:
    raise EnvUnavailable(probe()[1])


def policies(name: str, task: object) -> object:
    raise EnvUnavailable(probe()[1])


DOMAIN = Domain(
    name="android",
    description="Android apps on an emulator (AndroidWorld-style UI tasks)",
    entry_point="agentworld.domains.android:factory",
    probe=probe,
    policies=policies,
)
