"""The problems view: every problem across every setting, as a static folder a browser opens
from disk, a folder per model built once (plan, identity, modelfiles, folder), its matrix
(problems), a model's samples as columns (sampletable), one problem's samples for `show` too
(inspection), and the page (assets/)."""
