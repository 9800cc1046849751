"""npuwatch: monitoring and diagnostics agent for Huawei Ascend NPU clusters."""

__version__ = "0.1.0"
