"""Task records, loaders and input generation."""

from cudaperf.tasks.load import builtin_candidates, find_task, load_builtin_tasks, load_tasks
from cudaperf.tasks.schema import (
    ArgSpec,
    CFunctionTask,
    CProgramTask,
    CudaKernelTask,
    Distribution,
    Task,
    TaskError,
    Tolerance,
    task_from_dict,
)

__all__ = [
    "ArgSpec", "CFunctionTask", "CProgramTask", "CudaKernelTask", "Distribution", "Task", "TaskError",
    "Tolerance", "builtin_candidates", "find_task", "load_builtin_tasks", "load_tasks", "task_from_dict",
]
