"""Reference solutions of the exercises (no notebook imports these; the grader does, for
``grade(name, reference=True)``, and the tests grade each one)."""
