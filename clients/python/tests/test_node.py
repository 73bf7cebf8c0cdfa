"""The node's own routes: status, peers, routes, stored bundles, procedures, keys, metrics,
the description it serves."""

from __future__ import annotations

import pytest
import yaml

from conftest import ClientFor, Pair
from openapi_check import SPEC_PATH

from ferry_client import NotFound


def test_status_names_the_node_its_key_and_addresses(pair: Pair, client_for: ClientFor) -> None:
    alpha = client_for(pair.alpha)
    status = alpha.status()
    assert status.node_id == "dtn://alpha/"
    assert len(status.public_key) == 64 and int(status.public_key, 16) >= 0
    assert f"tcpcl://127.0.0.1:{pair.alpha.tcpcl}" in status.listening
    assert status.peers == 1
    assert status.store_quota > 0
    assert status.uptime_s >= 0 and status.version


def test_peers_and_routes_show_the_other_node(pair: Pair, client_for: ClientFor) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    peers = alpha.peers()
    assert [p.node_id for p in peers] == ["dtn://bravo/"]
    assert peers[0].outbound is True and "tcpcl" in peers[0].cla
    assert peers[0].listen_address == f"127.0.0.1:{pair.bravo.tcpcl}"
    back = bravo.peers()
    assert [p.node_id for p in back] == ["dtn://alpha/"]
    assert back[0].outbound is False
    # alpha dialled in without discovery: nothing said where it listens.
    assert back[0].listen_address is None
    routes = alpha.routes()
    assert any(r.destination == "dtn://bravo/" and r.hops == 1 for r in routes), routes


def test_procedures_are_those_of_the_configuration(pair: Pair, client_for: ClientFor) -> None:
    procs = {p.name: p for p in client_for(pair.bravo).procedures()}
    assert {"echo", "photo", "slow", "sum", "null"} <= set(procs)
    assert procs["sum"].params == ["int", "int"]
    assert procs["photo"].require == "has(camera)"
    assert procs["slow"].max_concurrent == 2
    assert procs["echo"].description and not procs["echo"].restricted
    assert [p.name for p in client_for(pair.alpha).procedures()] == ["ferry.procedures", "null"]
    assert procs["sum"].served_by == "program" and procs["sum"].returns == "text"
    assert [(p.name, p.type) for p in procs["sum"].parameters] == [("a", "int"), ("b", "int")]


def test_keys_metrics_and_the_served_description(pair: Pair, client_for: ClientFor) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    # Each node introduced itself to the other: alpha knows bravo's key, as bravo shows it.
    bravo_key = bravo.status().public_key
    known = {k.node: k for k in alpha.keys()}
    assert known["dtn://bravo/"].key == bravo_key, known
    assert "ferry_" in alpha.metrics()
    assert yaml.safe_load(alpha.openapi()) == yaml.safe_load(SPEC_PATH.read_text())


def test_a_key_is_forgotten_and_accepted(pair: Pair, client_for: ClientFor) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    bravo_key = bravo.status().public_key
    alpha.forget_key("bravo")
    assert "dtn://bravo/" not in {k.node for k in alpha.keys()}
    # Nothing presented since: nothing to accept without naming the key.
    with pytest.raises(NotFound):
        alpha.accept_key("dtn://bravo/")
    accepted = alpha.accept_key("dtn://bravo/", bravo_key)
    assert (accepted.node, accepted.key, accepted.source) == ("dtn://bravo/", bravo_key, "accepted")
    assert {k.node: k.key for k in alpha.keys()}["dtn://bravo/"] == bravo_key
    assert alpha.run("bravo", "echo", "still talking", timeout=30).text == "still talking"
