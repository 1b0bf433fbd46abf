"""A job that registers the order its framework runs (`pipeline_order`, what perseus.torch.attach
sends): the server plans for that order, refuses one that is not an order with the rank and item,
and refuses scheduler arguments or plans made for another order, naming the first difference."""
import subprocess

from conftest import PERSEUS

# torch's interleaved 1F1B on 2 GPUs, 2 stages each (stage s on GPU s % 2), 2 microbatches.
INTERLEAVED = [["0F0", "0F1", "2F0", "2F1", None, "2B0", "2B1", "0B0", "0B1"],
               [None, "1F0", "1F1", "3F0", "3B0", "3F1", "3B1", "1B0", "1B1"]]


def labels(order):
    """What each GPU's plan lists, in order: kind@stage of every compute action."""
    kinds = {"F": "forward", "B": "backward", "I": "backward_input", "W": "backward_weight"}
    out = []
    for action in order:
        if action is None:
            continue
        stage = action[:next(i for i, c in enumerate(action) if not c.isdigit())]
        out.append(f"{kinds[action[len(stage)]]}@{stage}")
    return out


def test_the_plan_follows_the_registered_order(server_factory):
    server = server_factory("all-max")  # no schedule arguments: jobs bring their order
    job_id = server.register_job(pp=2, pipeline_order=INTERLEAVED)
    server.register_ranks(job_id, pp=2)
    plans = server.schedules(job_id, range(2))
    for rank in range(2):
        status, body = plans[rank]
        assert status == 200, body
        assert [name for name, _ in body["frequencies"]] == labels(INTERLEAVED[rank])
        assert {mhz for _, mhz in body["frequencies"]} == {1410}
    status, job = server.get(f"/jobs/{job_id}")
    assert job["pipeline_order"] == INTERLEAVED  # kept with the job (and in its store)


def test_an_order_keyed_by_rank_is_the_same_order(server_factory):
    server = server_factory("all-max")
    job_id = server.register_job(pp=2, pipeline_order={"0": INTERLEAVED[0], "1": INTERLEAVED[1]})
    server.register_ranks(job_id, pp=2)
    plans = server.schedules(job_id, range(2))
    assert [n for n, _ in plans[1][1]["frequencies"]] == labels(INTERLEAVED[1])


def register(server, **extra):
    body = {"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2,
            "job_metadata": None, **extra}
    return server.post("/register_job", body)


def test_bad_orders_are_refused_naming_where(server_factory):
    server = server_factory("all-max")
    status, answer = register(server, pipeline_order=[["0F0", "0X1"], ["1F0"]])
    assert status == 422
    assert "field 'pipeline_order': rank 0 item 2: '0X1' is not an action" in answer["detail"]
    status, answer = register(server, pipeline_order=[["0F0", "0B0"]])
    assert status == 422
    assert "has 1 ranks but the job has pp_degree 2" in answer["detail"], answer
    status, answer = register(server, pipeline_order="1f1b")
    assert status == 422 and "pipeline_order" in answer["detail"], answer
    # Rank 1 would wait for a forward that rank 0 runs after waiting for rank 1: a deadlock.
    status, answer = register(server, pipeline_order=[["0F0", "0B0"], ["1B0", "1F0"]])
    assert status == 422 and "pipeline_order" in answer["detail"], answer


def test_arguments_for_another_order_are_refused(server_factory):
    server = server_factory("all-max", {"microbatches": 2})  # 1F1B with 2 microbatches
    status, answer = register(server, pipeline_order=INTERLEAVED)
    assert status == 422
    assert "its arguments name 1f1b (2 GPUs, 2 stages, 2 microbatches against the job's 2 GPUs, " \
           "4 stages, 2 microbatches)" in answer["detail"], answer
    # The same order by name is accepted.
    status, _ = register(server, pipeline_order=INTERLEAVED, scheduler="all-max",
                         scheduler_args={"microbatches": 2, "schedule": "interleaved-1f1b"})
    assert status == 200


def test_a_job_without_an_order_must_name_its_schedule(server_factory):
    server = server_factory("all-max")
    status, answer = register(server)
    assert status == 422
    assert "field 'microbatches': missing" in answer["detail"]
    assert "pipeline_order" in answer["detail"]


def test_a_frontier_for_another_order_is_refused(server_factory, tmp_path):
    profile, frontier = tmp_path / "profile.csv", tmp_path / "frontier"
    subprocess.run([PERSEUS, "profile", "synth", "--gpu", "a100", "--stages", "2", "--out",
                    str(profile)], check=True, capture_output=True)
    subprocess.run([PERSEUS, "plan", "--profile", str(profile), "--microbatches", "2",
                    "--blocking-power", "83.64", "--out", str(frontier), "--quiet"],
                   check=True, capture_output=True)
    server = server_factory()
    status, answer = register(server, pipeline_order=INTERLEAVED, scheduler="frontier",
                              scheduler_args={"frontier": str(frontier)})
    assert status == 422
    assert f"frontier {frontier} was planned for 1f1b" in answer["detail"], answer
