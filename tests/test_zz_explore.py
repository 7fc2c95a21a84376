import asyncio, base64, uuid, logging
import httpx
from temporalio.client import Client
from settings import Settings
from tests.helpers import new_thread, post_run, run_input, serve_stack, gateway_client

K1 = "k1:" + base64.b64encode(b"1" * 32).decode()
K2 = "k2:" + base64.b64encode(b"2" * 32).decode()

def keyed(client: Client, keys: str) -> Client:
    return Client(client.service_client, namespace=client.namespace, data_converter=Settings(payload_keys=keys).data_converter())

async def test_explore(client: Client) -> None:
    tq = f"tq-{uuid.uuid4()}"
    t = new_thread()
    async with serve_stack(keyed(client, K1), tq, payload_keys=K1) as stack:
        events = await post_run(stack.http, "demo", run_input(t, "r1", "mail a@example.com"))
        (interrupt,) = events[-1]["outcome"]["interrupts"]
    async with serve_stack(keyed(client, K2), tq, payload_keys=K2) as stack:
        r = await asyncio.wait_for(stack.http.get(f"/threads/{t}"), 40)
        print("GET", r.status_code, r.text)
        r = await asyncio.wait_for(stack.http.get(f"/threads"), 40)
        print("LIST", r.status_code, r.text[:500])
        r = await asyncio.wait_for(stack.http.get(f"/interrupts"), 40)
        print("INTERRUPTS", r.status_code, r.text[:500])
        body = {"threadId": t, "runId": "r2", "messages": [], "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]}
        try:
            async with stack.http.stream("POST", "/agents/demo", json=body, timeout=60) as resp:
                print("POST", resp.status_code)
                async def read():
                    async for line in resp.aiter_lines():
                        print("LINE", line[:300])
                await asyncio.wait_for(read(), 45)
        except Exception as e:
            print("POST EXC", type(e), e)
    async with serve_stack(keyed(client, K1), tq, payload_keys=K1) as stack:
        r = await stack.http.get(f"/threads/{t}")
        print("GET again", r.status_code, r.json()["status"])
