"""The Agilicious pilot as ``cableload world`` reproduces it: queueing rules and state machine;
and the agiros client's cutting of plans for a stock pilot."""

from __future__ import annotations

import numpy as np
import pytest

from backends.agiros import LinkLatency, StockQueue, plan_piece
from backends.pilot import (
    LAND_SPEED,
    TAKEOFF_THRESHOLD_M,
    Pilot,
    PilotState,
    ReferenceQueue,
    reference_problem,
    retimed,
    sample_nodes,
)
from cableload_sim.horizon import node_times
from cableload_sim.physics.world import UavTrajectory


def reference(t0: float, t1: float, x0: float = 0.0, speed: float = 1.0, points: int = 11):
    t = np.linspace(t0, t1, points)
    p = np.zeros((points, 3))
    p[:, 0] = x0 + speed * (t - t0)
    p[:, 2] = 1.0
    v = np.zeros((points, 3))
    v[:, 0] = speed
    zeros = np.zeros((points, 3))
    return {"t": t, "p": p, "v": v, "a": zeros, "j": zeros, "w": zeros}


def test_stock_queue_appends_only_after_the_queued_end():
    queue = ReferenceQueue("stock", "message")
    assert queue.offer(reference(0.0, 0.1), now=0.0)
    assert not queue.offer(reference(0.05, 0.15), now=0.0)  # overlaps: rejected
    assert queue.offer(reference(0.1, 0.2), now=0.0)  # starts exactly at the end
    assert queue.offer(reference(0.3, 0.4), now=0.0)  # after a gap
    assert (queue.accepted, queue.rejected, len(queue)) == (3, 1, 3)
    assert queue.end == pytest.approx(0.4)
    queue.drop_expired(0.25)
    assert len(queue) == 1 and queue.start == pytest.approx(0.3)


def test_receipt_pilot_retimes_every_reference_to_its_arrival():
    """As agiros: each point shifted by the arrival time less the first point's, then queued by
    the rule; a stream of pieces each sent as the last ends is taken whatever its stamps."""
    queue = ReferenceQueue("stock", "receipt")
    assert queue.offer(reference(5.0, 5.1), now=0.2)  # stamped in the future: flown at once
    assert queue.start == pytest.approx(0.2) and queue.end == pytest.approx(0.3)
    assert not queue.offer(reference(0.25, 0.35), now=0.25)  # arrives before the end
    assert queue.offer(reference(-3.0, -2.9), now=0.3)  # stamped in the past: from its arrival
    assert queue.end == pytest.approx(0.4)
    assert (queue.accepted, queue.rejected) == (2, 1)
    out = retimed(reference(1.0, 1.1), 2.0)
    np.testing.assert_allclose(out["t"], np.linspace(2.0, 2.1, 11))
    np.testing.assert_array_equal(out["p"], reference(1.0, 1.1)["p"])  # values untouched
    with pytest.raises(ValueError, match="trajectory times"):
        ReferenceQueue("stock", "stamped")


def test_receipt_stream_of_pieces_samples_the_plan_across_their_joins():
    """Pieces of 0.1 s each arriving as the last ends (float noise in their ends, as through ROS
    times): the controller's horizon sampled every 0.01 s matches the plan; no join reads as the
    hover after the last point."""
    queue = ReferenceQueue("stock", "receipt")
    worst = 0.0
    for k in range(30):
        start = 1.7 + 0.1 * k
        piece = reference(start, start + 0.1 - 1e-12, x0=start)
        assert queue.offer(piece, now=start)
        for s in range(10):
            now = start + 0.01 * s
            out = queue.sample(now)
            worst = max(worst, float(np.abs(out.v[:2, 0] - 1.0).max()))
            worst = max(worst, float(np.abs(out.p[:2, 0] - out.t[:2]).max()))
    assert worst < 1e-6


def test_link_latency_from_the_pilots_telemetry():
    latency = LinkLatency()
    assert latency.typical == 0.0 and latency.shortest == 0.0
    for value in (0.012, 0.010, 0.030, 0.011, -0.001, 2.0):  # the last two: not latencies
        latency.add(value)
    assert latency.typical == pytest.approx(0.0115) and latency.shortest == pytest.approx(0.010)
    for _ in range(LinkLatency.KEEP):
        latency.add(0.05)
    assert latency.typical == pytest.approx(0.05) and latency.shortest == pytest.approx(0.05)


def test_replacing_queue_takes_every_valid_reference():
    queue = ReferenceQueue("replace", "message")
    assert queue.offer(reference(0.0, 1.0), now=0.0)
    assert queue.offer(reference(0.5, 1.5), now=0.5)
    assert len(queue) == 1 and queue.start == pytest.approx(0.5)


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda r: r.update(t=r["t"][::-1].copy()), "increasing"),
        (lambda r: r["p"].__setitem__((3, 0), np.nan), "non-finite"),
        (
            lambda r: r.update(
                t=r["t"][:1], p=r["p"][:1], v=r["v"][:1], a=r["a"][:1], j=r["j"][:1], w=r["w"][:1]
            ),
            "at least 2 points",
        ),
        (lambda r: r.update(v=r["v"][:, :2]), "shape"),
    ],
)
def test_malformed_reference_is_rejected_by_both_rules(change, why):
    for mode in ("stock", "replace"):
        ref = reference(0.0, 1.0)
        change(ref)
        assert why in reference_problem(ref)
        queue = ReferenceQueue(mode, "message")
        assert not queue.offer(ref, now=0.0) and queue.rejected == 1 and len(queue) == 0


def test_queue_sample_follows_the_references_and_holds_the_end():
    queue = ReferenceQueue("stock", "message")
    queue.offer(reference(0.0, 0.5, x0=0.0), now=0.0)
    queue.offer(reference(0.5, 1.0, x0=0.5), now=0.0)
    plan = queue.sample(0.2)
    assert plan.n_nodes == 21 and plan.t[0] == pytest.approx(0.2)
    inside = plan.t <= 1.0
    np.testing.assert_allclose(plan.p[inside, 0], plan.t[inside], atol=1e-12)
    np.testing.assert_allclose(plan.v[inside, 0], 1.0)
    beyond = plan.t > 1.0
    np.testing.assert_allclose(plan.p[beyond, 0], 1.0)  # the final position, at rest
    np.testing.assert_allclose(plan.v[beyond], 0.0)
    assert queue.sample(1.5) is None  # everything expired


def test_state_machine_arm_start_track_hover_land_off():
    pilot = Pilot("quad1", "stock", times="message", land_drop_m=0.5)
    here = np.array([1.0, 2.0, 3.0])
    assert pilot.plan(0.0, here) is None and not pilot.start(here)  # off: start ignored
    assert not pilot.offer(reference(0.0, 1.0), now=0.0)  # not armed: nothing queued
    pilot.enable(True)
    assert pilot.state is PilotState.ENABLED and pilot.plan(0.0, here) is None
    assert pilot.start(here) and pilot.state is PilotState.HOVER
    np.testing.assert_allclose(pilot.plan(0.0, here).p, np.tile(here, (21, 1)))
    ref = reference(1.0, 2.0, x0=5.0)
    assert pilot.offer(ref, now=0.5)
    assert pilot.plan(0.5, here).p[0, 0] == pytest.approx(here[0])  # not yet started
    assert pilot.state is PilotState.HOVER
    plan = pilot.plan(1.5, here)
    assert pilot.state is PilotState.TRACKING and plan.p[0, 0] == pytest.approx(5.5)
    plan = pilot.plan(2.5, here)  # the queue ran out: hover at its end
    assert pilot.state is PilotState.HOVER and plan.p[0, 0] == pytest.approx(6.0)
    assert pilot.land(3.0, plan.p[0])
    descent = pilot.plan(3.5, plan.p[0])
    assert pilot.state is PilotState.LANDING
    assert descent.p[0, 2] == pytest.approx(plan.p[0, 2] - 0.5 * LAND_SPEED) and descent.v[0, 2] < 0.0
    assert pilot.plan(3.0 + 0.5 / LAND_SPEED + 0.01, plan.p[0]) is None  # came down land_drop_m: off
    assert pilot.state is PilotState.OFF and pilot.landed


def test_land_is_refused_while_tracking_the_pilot_hovers_instead():
    pilot = Pilot("quad1", "stock", times="message")
    pilot.enable(True)
    here = np.array([0.0, 0.0, 2.0])
    pilot.start(here)
    pilot.offer(reference(0.0, 5.0), now=0.0)
    pilot.plan(1.0, here)
    assert pilot.state is PilotState.TRACKING
    where = np.array([1.0, 0.0, 2.0])
    assert not pilot.land(1.0, where)
    assert pilot.state is PilotState.HOVER and len(pilot.queue) == 0
    np.testing.assert_allclose(pilot.plan(1.1, where).p[0], where)
    assert pilot.land(1.2, where) and pilot.state is PilotState.LANDING  # from hover it lands


def test_start_from_the_ground_climbs_the_takeoff_height_then_hovers():
    pilot = Pilot("quad1", "stock", times="message", takeoff_height_m=0.5)
    pilot.enable(True)
    ground = np.array([1.0, 2.0, 0.05])
    assert pilot.start(ground, t=10.0)
    duration = 0.5 / LAND_SPEED
    plan = pilot.plan(10.0, ground)
    assert pilot.state is PilotState.TRACKING
    assert plan.p[0, 2] == pytest.approx(0.05) and plan.v[0, 2] == pytest.approx(0.0, abs=1e-9)
    middle = pilot.plan(10.0 + duration / 2, ground)
    assert middle.p[0, 2] == pytest.approx(0.3) and middle.v[0, 2] > LAND_SPEED  # faster mid-way
    # a reference sent during the climb is rejected by the stock queue (it runs until its end)
    assert not pilot.offer(reference(10.5, 11.0), now=10.2)
    top = pilot.plan(10.0 + duration + 0.1, ground)
    assert pilot.state is PilotState.HOVER
    np.testing.assert_allclose(top.p[0], [1.0, 2.0, 0.55], atol=1e-9)


def test_start_above_the_threshold_is_a_hand_held_start_hovering_in_place():
    pilot = Pilot("quad1", "stock", times="message")
    pilot.enable(True)
    held = np.array([0.0, 0.0, TAKEOFF_THRESHOLD_M + 0.2])
    assert pilot.start(held)
    assert len(pilot.queue) == 0
    np.testing.assert_allclose(pilot.plan(0.0, held).p[-1], held)


def test_force_hover_drops_the_queue_and_disarm_stops_everything():
    pilot = Pilot("quad1", "stock", times="message")
    pilot.enable(True)
    pilot.start(np.array([0.0, 0.0, 1.0]))
    pilot.offer(reference(0.0, 5.0), now=0.0)
    assert pilot.plan(1.0, np.zeros(3)) is not None and pilot.state is PilotState.TRACKING
    where = np.array([0.7, 0.0, 1.0])
    pilot.force_hover(where)
    assert len(pilot.queue) == 0 and pilot.state is PilotState.HOVER
    np.testing.assert_allclose(pilot.plan(1.1, where).p[-1], where)
    pilot.enable(False)
    assert pilot.state is PilotState.OFF and pilot.plan(1.2, where) is None


def test_plan_piece_for_a_stock_pilot_starts_at_the_queued_end():
    """Consecutive plans cut as the client cuts them are each accepted by a stock queue and
    together follow the plans."""
    t = node_times(0.0)
    p = np.zeros((21, 3))
    p[:, 0] = t
    v = np.zeros((21, 3))
    v[:, 0] = 1.0
    zeros = np.zeros((21, 3))
    queue = ReferenceQueue("stock", "message")
    end = None
    for k in range(5):
        t0 = 0.1 * k
        plan = UavTrajectory(t + t0, p + [t0, 0, 0], v, zeros, zeros, zeros)
        start = t0 if end is None else end
        piece = plan_piece(plan, start, t0 + 0.15, 0.01)
        ref = {"t": piece.t, "p": piece.p, "v": piece.v, "a": piece.a, "j": piece.j, "w": piece.body_rates}
        assert queue.offer(ref, now=t0), f"plan {k} rejected"
        end = piece.t[-1]
        assert np.diff(piece.t).max() <= 0.01 + 1e-12
    sample = queue.sample(0.42)  # after the last offer (earlier pieces have expired)
    np.testing.assert_allclose(sample.p[sample.t <= end, 0], sample.t[sample.t <= end])


def cubic_plan(t0: float) -> UavTrajectory:
    """A plan on the horizon's nodes whose position is a cubic in time (x = c (t - t0)^3 + ...):
    the onboard controller's Hermite interpolation reproduces it exactly between nodes."""
    t = node_times(t0)
    tau = t - t0
    c = np.array([0.8, -0.5, 0.3])
    p = c * tau[:, None] ** 3 + [0.1, 0.2, 1.0]
    v = 3 * c * tau[:, None] ** 2
    a = 6 * c * tau[:, None]
    j = np.tile(6 * c, (t.size, 1))
    return UavTrajectory(t, p, v, a, j, np.zeros((t.size, 3)))


def test_pieces_and_the_pilot_keep_the_plan_the_controller_would_fly():
    """Cut into a stock pilot's pieces and sampled by the pilot for the controller, a plan stays
    the same curve (straight chords between its nodes would cut the corners: 0.66 mm and
    1 mm/s on the teacher's plans)."""
    plan = cubic_plan(2.0)
    piece = plan_piece(plan, 2.05, 2.3, 0.01)
    tau = piece.t - 2.0
    c = np.array([0.8, -0.5, 0.3])
    np.testing.assert_allclose(piece.p, c * tau[:, None] ** 3 + [0.1, 0.2, 1.0], atol=1e-12)
    np.testing.assert_allclose(piece.v, 3 * c * tau[:, None] ** 2, atol=1e-12)
    np.testing.assert_allclose(piece.a, 6 * c * tau[:, None], atol=1e-12)
    queue = ReferenceQueue("stock", "message")
    assert queue.offer(
        {"t": piece.t, "p": piece.p, "v": piece.v, "a": piece.a, "j": piece.j, "w": piece.body_rates},
        now=2.05,
    )
    sampled = queue.sample(2.123)
    inside = sampled.t <= piece.t[-1]
    tau = sampled.t[inside] - 2.0
    np.testing.assert_allclose(sampled.p[inside], c * tau[:, None] ** 3 + [0.1, 0.2, 1.0], atol=1e-12)
    np.testing.assert_allclose(sampled.v[inside], 3 * c * tau[:, None] ** 2, atol=1e-12)


def test_sample_nodes_holds_the_ends():
    plan = cubic_plan(0.0)
    nodes = {"t": plan.t, "p": plan.p, "v": plan.v, "a": plan.a, "j": plan.j, "w": plan.body_rates}
    out = sample_nodes(nodes, np.array([-0.5, plan.t[-1] + 1.0]))
    np.testing.assert_allclose(out["p"], plan.p[[0, -1]])  # first values, then the end
    np.testing.assert_allclose(out["v"][0], plan.v[0])
    np.testing.assert_allclose(out["j"][0], plan.j[0])
    for name in ("v", "a", "j", "w"):
        np.testing.assert_allclose(out[name][1], 0.0)  # at rest after the last point
    noise = sample_nodes(nodes, np.array([plan.t[-1] + 1e-9]))  # float noise: still the end
    np.testing.assert_allclose(noise["v"][0], plan.v[-1])


def test_stock_queue_waits_for_a_late_plan_before_calling_it_rejected():
    """A plan made at 2.04 s but sent at 2.24 s is still on its way when telemetry stamped 2.24 s
    shows the queue dry: not a rejection, and the next piece continues from its end."""
    queue = StockQueue(in_flight_s=0.2)
    queue.sent(2.0, 2.35)
    assert not queue.telemetry(2.30, 2.35)
    queue.sent(2.24, 2.49)  # late: sent 0.2 s after its plan's time
    assert not queue.telemetry(2.36, 2.36)  # ran dry meanwhile; the piece is on its way
    assert (queue.rejected, queue.end) == (0, 2.49)
    assert not queue.telemetry(2.50, 2.50)  # it arrived and was flown
    assert queue.rejected == 0


def test_stock_queue_detects_a_rejection_and_resumes_from_the_pilots_end():
    queue = StockQueue(in_flight_s=0.2)
    queue.sent(1.0, 1.25)
    queue.sent(1.1, 1.35)
    # the pilot's queue ends at 1.25: the second piece was rejected
    assert queue.telemetry(1.31, 1.25)
    assert (queue.rejected, queue.end) == (1, 1.25)
    assert not queue.telemetry(1.32, 1.25)  # counted once


def test_stock_queue_after_a_rejection_keeps_what_is_still_on_its_way():
    queue = StockQueue(in_flight_s=0.2)
    queue.sent(1.0, 1.25)
    queue.sent(1.1, 1.45)  # rejected
    queue.sent(1.2, 1.55)  # starts at the rejected one's end: the pilot will take it
    assert queue.telemetry(1.32, 1.25)
    assert (queue.rejected, queue.end) == (1, 1.55)


def test_client_bookkeeping_and_pilot_agree_with_delayed_plans():
    """The client's cutting and bookkeeping against the stock pilot, with plans sent up to
    0.22 s late and delivered 0.04 s later (telemetry at 20 Hz shows the queue dry meanwhile):
    the pilot rejects nothing."""
    rng = np.random.default_rng(5)
    pilot = ReferenceQueue("stock", "message")
    client = StockQueue(in_flight_s=0.2)
    period, margin, in_transit, sent_at = 0.1, 0.15, [], 0.0
    telemetry_times = np.arange(0.0, 6.0, 0.05)
    for k in range(50):
        plan_time = 0.1 * k  # one planner: a plan made late delays the next
        sent_at = max(sent_at + 0.01, plan_time + (0.22 if k % 7 == 3 else float(rng.uniform(0.0, 0.05))))
        # the telemetry the client has read by the time it sends
        for now in telemetry_times[(telemetry_times <= sent_at)]:
            for arrival, ref in [x for x in in_transit if x[0] <= now]:
                pilot.offer(ref, arrival)
                in_transit.remove((arrival, ref))
            pilot.drop_expired(now)
            client.telemetry(now, pilot.end if pilot.end is not None else now)
        telemetry_times = telemetry_times[telemetry_times > sent_at]
        start = plan_time if client.end is None or client.end < plan_time else client.end
        end = sent_at + period + margin
        in_transit.append((sent_at + 0.04, reference(start, end)))
        client.sent(sent_at, end)
    assert pilot.rejected == 0 and client.rejected == 0


def test_a_re_timing_stock_pilots_refusals_are_judged_from_its_telemetry():
    """``agiros.judge_pieces``: a piece of 0.1 s sent at 10.0 s, the latency up to 12 ms. A
    telemetry message before it surely arrived judges nothing; one after, with the queue ending
    where the piece puts it, counts it taken; one with the queue ending where it did before (or
    empty) marks it, and it counts as refused at the first message after it would have ended,
    unless a message before that showed it taken (it came later than any piece before: on a
    loaded machine it was counted refused, and the pilot had taken it), or that first message,
    made before any newer piece was sent, shows the queue reaching its end (the marking message
    came before it arrived: at the end of an episode there is no newer piece); a piece never
    seen short is not counted (the next piece may have extended the queue)."""
    from backends.agiros import judge_pieces

    piece = [(10.0, 0.1, False)]
    marked = [(10.0, 0.1, True)]
    assert judge_pieces(piece, 10.01, True, 10.005, 0.012) == (piece, 0)  # not yet arrived
    assert judge_pieces(piece, 10.04, True, 10.111, 0.012) == ([], 0)  # taken: ends 10.111
    assert judge_pieces(piece, 10.04, True, 10.008, 0.012) == (marked, 0)  # short: old end
    assert judge_pieces(piece, 10.04, False, 10.04, 0.012) == (marked, 0)  # short: ran dry
    assert judge_pieces(marked, 10.09, True, 10.17, 0.012) == ([], 0)  # arrived late, taken
    assert judge_pieces(marked, 10.1, True, 10.008, 0.012) == ([], 1)  # refused
    sends = ((10.0, 0.1), (10.1, 0.1))  # (left, duration): the next piece left at 10.1 s
    assert judge_pieces(marked, 10.2, True, 10.25, 0.012, sends) == ([], 1)  # the next one's end
    assert judge_pieces(marked, 10.1, True, 10.111, 0.012, sends[:1]) == ([], 0)  # the last: taken
    assert judge_pieces(marked, 10.1, True, 10.111, 0.012, sends) == ([], 0)  # before the next ends
    assert judge_pieces(marked, 10.1, True, 10.008, 0.012, sends) == ([], 1)  # short: refused
    assert judge_pieces(marked, 10.1, False, 10.1, 0.012, sends[:1]) == ([], 1)  # ran dry: refused
    assert judge_pieces(piece, 10.2, True, 10.25, 0.012) == ([], 0)  # too late to tell
    # a long latency waits longer, never past half the piece
    assert judge_pieces(piece, 10.04, True, 10.008, 0.03) == (piece, 0)
    assert judge_pieces(piece, 10.051, True, 10.008, 0.2) == (marked, 0)
