"""A progress bar for the notebooks that leaves no stub in a saved notebook.

tqdm's notebook bar is a widget; a headless run (papermill, ``make run``) cannot render it, and
the saved output keeps its text stand-in (``sweep:   0%|          | 0/8 [00:00<?, ?it/s]``)
frozen at the moment it was first shown.  :class:`Progress` shows the same kind of widget while
the work runs and, when it closes, replaces it (the same display, by its id) with one line that
says what was done.  A live front end (JupyterLab) draws the bar as it moves and then the line;
a saved notebook holds the line only.  Outside a kernel there is no widget, only that line.
"""
from __future__ import annotations

__all__ = ["Progress", "progress"]


class Progress:
    """A bar over ``total`` steps named ``desc`` (the subset of tqdm's interface that
    :func:`perfkit.bench.sweep` uses: ``update``, ``set_postfix_str``, ``close``)."""

    def __init__(self, total: int, desc: str = "", **_ignored):
        self.total, self.desc = int(total), desc
        self.n, self.postfix, self.closed = 0, "", False
        self._bar = self._label = self._box = self._handle = None
        if _in_kernel():
            try:
                import ipywidgets
                from IPython.display import display
            except ImportError:  # no widgets installed: the closing line alone
                return
            self._bar = ipywidgets.IntProgress(value=0, min=0, max=max(self.total, 1), description=desc)
            self._label = ipywidgets.Label(self._status())
            self._box = ipywidgets.HBox([self._bar, self._label])
            self._handle = display(self._box, display_id=True)

    def _status(self) -> str:
        return f"{self.n}/{self.total}" + (f"  {self.postfix}" if self.postfix else "")

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.max = max(self._bar.max, self.n)
            self._bar.value = self.n
            self._label.value = self._status()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = str(s)
        if self._label is not None:
            self._label.value = self._status()

    def summary(self) -> str:
        """The line left in place of the bar."""
        return f"{self.desc or 'progress'}: {self.n} of {self.total} done"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._handle is not None:
            from IPython.display import Pretty

            self._handle.update(Pretty(self.summary()))  # the widget's output becomes the line
            self._box.close()
            self._bar.close()
            self._label.close()
        else:
            print(self.summary())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress(total: int, desc: str = "", **kw) -> Progress:
    """A :class:`Progress`; pass ``progress=lesson.progress`` to :func:`perfkit.bench.sweep`."""
    return Progress(total, desc, **kw)


def _in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (a front end there may draw widgets)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
