"""Every pinned claim is strict under pytest: a chapter cell whose claim fails fails its nbval test
(the kernels nbval starts inherit this process's environment)."""
import os

import pytest
import torch

from course_lib.claims import STRICT_VARIABLE

os.environ[STRICT_VARIABLE] = "strict"


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module's toy runs: tiny matmuls gain nothing from two, and a busy
    machine makes two much slower. A module asks for it with pytestmark = usefixtures("one_thread")."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


LOOPBACK = ["127.0.0.1", "::1"]


def pytest_collection_modifyitems(config, items):
    """No test reaches the network: pytest-socket lets a socket connect to the loopback addresses only
    (JupyterLab and chromium in the browser test, the local stand-in index of test_makefile, gloo's
    ranks); anything else raises SocketBlockedError. The course's model loads from local files only."""
    for item in items:
        if item.get_closest_marker("allow_hosts") is None:
            item.add_marker(pytest.mark.allow_hosts(LOOPBACK))
