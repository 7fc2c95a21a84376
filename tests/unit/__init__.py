"""The unit tier: pure logic and the gateway's HTTP surface, with no server and no network."""
