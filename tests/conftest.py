"""Every pinned claim is strict under pytest: a chapter cell whose claim fails fails its nbval test
(the kernels nbval starts inherit this process's environment)."""
import os

from course_lib.claims import STRICT_VARIABLE

os.environ[STRICT_VARIABLE] = "strict"
