"""The MariaDB URL's ``galera`` option on a server that is not a Galera node: known values only,
and harmless (the store works as without it). The refusal of a Galera node without the option
is tested on a real cluster (tests/faults/test_galera.py)."""

from __future__ import annotations

import pytest

from sagacity import Phase, Sagacity
from sagacity.errors import ConfigurationError

pytest.importorskip("pymysql")


def test_an_unknown_galera_mode_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match=r"galera='yes' is not known \(known: single-writer\)"):
        Sagacity("mysql://root@127.0.0.1:1/test?galera=yes")


def test_an_unknown_parameter_names_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown parameter 'wsrep' \(known: unix_socket, galera\)"):
        Sagacity("mysql://root@127.0.0.1:1/test?wsrep=on")


@pytest.mark.mysql
def test_the_option_on_a_server_that_is_not_galera_changes_nothing(mysql_url: str) -> None:
    with Sagacity(mysql_url + "?galera=single-writer") as sg:
        sg.journal.append("s", "tool", Phase.INTENT, "{}", "")
    with Sagacity(mysql_url) as sg:
        assert [e.seq for e in sg.entries("s")] == [1]
        assert sg.verify("s").valid
