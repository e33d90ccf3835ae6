"""The os-ken shell: rule data -> real OpenFlow 1.3 messages (serialised and parsed back
with os-ken's own parser), with a fake datapath."""

from os_ken.ofproto import ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser

from controller import rules as R
from controller.app import to_ofp


class FakeDatapath:
    ofproto = ofproto_v1_3
    ofproto_parser = ofproto_v1_3_parser
    id = 1

    def __init__(self):
        self.xid = 0

    def set_xid(self, msg):
        self.xid += 1
        msg.set_xid(self.xid)


def roundtrip(dp, msg):
    dp.set_xid(msg)
    msg.serialize()
    version, msg_type, msg_len, xid = ofproto_parser.header(msg.buf)
    return ofproto_parser.msg(dp, version, msg_type, msg_len, xid, msg.buf)


def test_dscp_rule_becomes_set_field_and_output():
    dp = FakeDatapath()
    rule = R.Rule(1, R.PRIO_JOB_FLOW, R.make_match(eth_type=0x800, ip_proto=6,
                                                   ipv4_src="10.0.0.1", ipv4_dst="10.0.0.3",
                                                   tcp_dst=9000),
                  (("set_dscp", 56), ("output", 3)), 0x5100000000000001)
    back = roundtrip(dp, to_ofp(dp, R.FlowMod("add", rule)))
    assert back.command == ofproto_v1_3.OFPFC_ADD and back.priority == R.PRIO_JOB_FLOW
    assert back.cookie == 0x5100000000000001
    assert back.match["ipv4_dst"] == "10.0.0.3" and back.match["tcp_dst"] == 9000
    actions = back.instructions[0].actions
    assert actions[0].key == "ip_dscp" and actions[0].value == 56
    assert actions[1].port == 3


def test_queue_controller_drop_modify_delete_clear():
    dp = FakeDatapath()
    q = R.Rule(1, 200, R.make_match(eth_type=0x800), (("set_queue", 4), ("output", 1)), 9)
    back = roundtrip(dp, to_ofp(dp, R.FlowMod("modify", q)))
    assert back.command == ofproto_v1_3.OFPFC_MODIFY_STRICT
    assert back.instructions[0].actions[0].queue_id == 4
    arp = R.base_rules(1)[1]
    back = roundtrip(dp, to_ofp(dp, R.FlowMod("add", arp)))
    assert back.instructions[0].actions[0].port == ofproto_v1_3.OFPP_CONTROLLER
    miss = R.base_rules(1)[0]
    assert roundtrip(dp, to_ofp(dp, R.FlowMod("add", miss))).instructions == []
    back = roundtrip(dp, to_ofp(dp, R.FlowMod("delete", q)))
    assert back.command == ofproto_v1_3.OFPFC_DELETE_STRICT
    back = roundtrip(dp, to_ofp(dp, R.FlowMod("clear", R.Rule(1, 0, (), (), 0))))
    assert back.command == ofproto_v1_3.OFPFC_DELETE and back.table_id == ofproto_v1_3.OFPTT_ALL


def test_fast_match_bytes_equal_os_kens_own_encoding():
    from hypothesis import given, strategies as st

    from controller.ofwire import fast_match

    dp = FakeDatapath()
    parser = ofproto_v1_3_parser

    @given(st.fixed_dictionaries({"eth_type": st.just(0x800)}, optional={
        "ip_proto": st.integers(0, 255), "ipv4_src": st.ip_addresses(v=4).map(str),
        "ipv4_dst": st.ip_addresses(v=4).map(str), "tcp_dst": st.integers(0, 65535),
        "tcp_src": st.integers(0, 65535), "in_port": st.integers(1, 0xffffff00)}))
    def check(fields):
        match = R.make_match(**fields)
        acts = [parser.OFPInstructionActions(ofproto_v1_3.OFPIT_APPLY_ACTIONS,
                                             [parser.OFPActionOutput(2)])]
        ours = parser.OFPFlowMod(dp, cookie=5, priority=7, match=fast_match(match),
                                 instructions=acts)
        stock = parser.OFPFlowMod(dp, cookie=5, priority=7, match=parser.OFPMatch(**fields),
                                  instructions=acts)
        for m in (ours, stock):
            m.set_xid(42)
            m.serialize()
        assert bytes(ours.buf) == bytes(stock.buf)

    check()
    # a field we do not pack ourselves falls back to os-ken's OFPMatch
    assert type(fast_match(R.make_match(eth_type=0x800, udp_dst=53))) is parser.OFPMatch


def test_admission_rule_goes_to_table_0_with_goto_and_reads_back_equal():
    """Table and goto instruction survive the wire, and the flow-stats read-back of the
    same entry becomes the same rule data (so a reconnect diff sends nothing for it)."""
    from types import SimpleNamespace

    from controller.app import rule_of_stats

    dp = FakeDatapath()
    for rule in (R.admission_rules([(1, 2, "10.0.0.2")], [(1, 5)])
                 + R.forwarding_rules({1: {"10.0.0.2": 2}})):
        back = roundtrip(dp, to_ofp(dp, R.FlowMod("add", rule)))
        assert back.table_id == rule.table
        stats = SimpleNamespace(priority=back.priority, match=back.match, cookie=back.cookie,
                                instructions=back.instructions, table_id=back.table_id)
        assert rule_of_stats(dp, stats) == rule
        gotos = [i for i in back.instructions
                 if i.type == ofproto_v1_3.OFPIT_GOTO_TABLE]
        assert [g.table_id for g in gotos] == (
            [R.TABLE_FORWARD] if rule.table == R.TABLE_ADMIT else [])


def test_the_app_takes_its_service_from_os_kens_contexts_only():
    """No module global: without the 'sluice_service' context the app refuses to start."""
    import pytest

    from controller import app

    with pytest.raises(RuntimeError, match="sluice_service"):
        app.SluiceController()
    assert not hasattr(app, "runtime")
