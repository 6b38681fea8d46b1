import re
from hitl.core import decisions, runs
from hitl.core.models import HumanInterrupt, Thread, Run
from hitl.core.runs import timetravel


def test_explore(manual_runs, client_for, reviewer, requester, settings):
    run = runs.run_start(graph="demo", input={}, user=reviewer, title="report")
    assert manual_runs(run) == "interrupted"
    for _ in range(3):
        for row in HumanInterrupt.objects.filter(thread=run.thread, status="pending"):
            if row.action == "ask_clarification":
                decisions.interrupt_resolve(
                    interrupt_id=row.pk, user=reviewer, response_type="response", args="Q3 2025"
                )
            else:
                decisions.interrupt_resolve(
                    interrupt_id=row.pk, user=reviewer, response_type="accept"
                )
        nxt = Run.objects.filter(thread=run.thread).order_by("-created_at").first()
        if nxt.status == "queued":
            manual_runs(nxt)
    thread = Thread.objects.get(pk=run.thread_id)
    steps = timetravel.thread_checkpoints(thread)
    before_send = [cp for cp in steps if cp["next"] == ["tools"]][1]
    fork = timetravel.thread_fork(
        thread=thread,
        user=reviewer,
        checkpoint_id=before_send["checkpoint_id"],

    )
    print(manual_runs(fork))
    c = client_for(reviewer)
    page = c.get(f"/threads/{thread.pk}/").content.decode()
    print("PAGE BYTES", len(page))
    for part in ("section-result", "section-artifacts"):
        seg = page[page.index(f'id="{part}"') :][:1500]
        print(part, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", seg))[:600])
    frag = c.get(f"/threads/{thread.pk}/history/?partial=1").content.decode()
    print("FRAG BYTES", len(frag))
    print(
        re.sub(
            r"[ \t]+",
            " ",
            re.sub(
                r"<pre>.*?</pre>",
                "",
                re.sub(r"<[^>]+>", "", re.sub(r"<pre>.*?</pre>", "", frag, flags=re.S)),
                flags=re.S,
            ),
        )
    )
    m = re.search(r'data-more="([^"]+)"', frag)
    frag2 = c.get(m.group(1).replace("&amp;", "&")).content.decode()
    print(
        re.sub(
            r"\n\s*\n+",
            "\n",
            re.sub(
                r"[ \t]+",
                " ",
                re.sub(r"<[^>]+>", "", re.sub(r"<pre>.*?</pre>", "", frag2, flags=re.S)),
            ),
        )
    )
    graph = timetravel._graph(thread)
    for snap in list(graph.get_state_history(timetravel._config(thread)))[:4]:
        print("MD", dict(snap.metadata), snap.next)
    print(
        [
            (r.pk, r.kind, r.metadata)
            for r in Run.objects.filter(thread=thread).order_by("created_at")
        ]
    )
    from hitl.core.models import AuditEvent

    for snap in list(graph.get_state_history(timetravel._config(thread)))[:2]:
        print(
            "PARENT",
            snap.config["configurable"]["checkpoint_id"],
            snap.parent_config,
            snap.created_at,
        )
    print(
        "AUDIT", [(e.data, e.created_at) for e in AuditEvent.objects.filter(kind="thread.forked")]
    )
