"""Inside the parameter server, a client includes no server or table code and the tables no
server code (scripts/check_layering.py's PS_ROLES): the tree holds to it, and a wrong include
is found."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "check_layering", ROOT / "scripts" / "check_layering.py"
)
check_layering = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layering)


def test_the_parameter_server_roles_include_only_what_they_may():
    assert check_layering.ps_role_violations() == {}


def test_a_client_or_table_including_server_code_is_found(tmp_path, monkeypatch):
    for folder in ("client/detail", "table", "server"):
        (tmp_path / "ps" / folder).mkdir(parents=True)
    (tmp_path / "ps" / "client" / "detail" / "call.h").write_text(
        '#include "ps/sharding.h"\n#include "ps/server/server.h"\n'
    )
    (tmp_path / "ps" / "client" / "client.cc").write_text('#include "ps/table/sparse_table.h"\n')
    (tmp_path / "ps" / "table" / "rows.cc").write_text('#include "ps/server/detail/service.h"\n')
    (tmp_path / "ps" / "server" / "server.cc").write_text(
        '#include "ps/table/sparse_table.h"\n#include "ps/client/future.h"\n'
    )
    monkeypatch.setattr(check_layering, "CSRC", tmp_path)
    assert check_layering.ps_role_violations() == {
        "ps/client -> ps/server": ["ps/client/detail/call.h"],
        "ps/client -> ps/table": ["ps/client/client.cc"],
        "ps/table -> ps/server": ["ps/table/rows.cc"],
        "ps/server -> ps/client": ["ps/server/server.cc"],
    }
