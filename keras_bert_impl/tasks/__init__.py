"""Tasks: one `TaskSpec` per task (model, head variables, serving outputs),
the registry that tools, export and serving look tasks up in, the jobs behind
the fine-tuning tools, and the Python task models (`TextClassifier`, ...)."""
