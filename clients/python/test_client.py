"""The client against a running `multienv serve` (started by test/pools/python-client.test.ts, which sets
MULTIENV_SERVE_URL, MULTIENV_PROJECT_DIR and MULTIENV_TASK): claim, DevTools through the claim's handles, renew,
release, a 503 with Retry-After, the token refused."""

import os
import unittest

from multienv_client import Client, ServeError, devtools

URL = os.environ.get("MULTIENV_SERVE_URL")
PROJECT = os.environ.get("MULTIENV_PROJECT_DIR")
TASK = os.environ.get("MULTIENV_TASK")


@unittest.skipUnless(URL and PROJECT and TASK, "run by test/pools/python-client.test.ts against a real serve")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = Client.from_project(PROJECT, URL)

    def test_claim_look_renew_release(self):
        claim = self.client.claim(TASK, ttl_seconds=60)
        self.assertEqual(sorted(claim), ["computers", "episode", "expiresAt", "id", "stack"])
        agent = claim["computers"]["agent"]
        self.assertIn("Chrome", devtools(agent)["Browser"])
        renewed = self.client.renew(claim["id"], ttl_seconds=120)
        self.assertGreater(renewed["expiresAt"], claim["expiresAt"])
        # The only env is held: a second claim waits, then is told to come back.
        with self.assertRaises(ServeError) as busy:
            self.client.claim(TASK, wait_seconds=0.2)
        self.assertEqual(busy.exception.status, 503)
        self.assertEqual(busy.exception.retry_after, 1)
        self.assertEqual(busy.exception.body["pool"]["claimed"], 1)
        released = self.client.release(claim["id"], collect=False)
        self.assertEqual(released["episode"], claim["episode"])
        with self.assertRaises(ServeError) as gone:
            self.client.renew(claim["id"])
        self.assertEqual(gone.exception.status, 404)

    def test_pools(self):
        pools = self.client.pools()
        self.assertEqual([p["task"] for p in pools], [TASK])

    def test_a_wrong_token_is_refused(self):
        with self.assertRaises(ServeError) as refused:
            Client(URL, "0" * 64).pools()
        self.assertEqual(refused.exception.status, 401)

    def test_a_bad_field_is_named(self):
        with self.assertRaises(ServeError) as bad:
            self.client.claim(TASK, ttl_seconds="soon")
        self.assertEqual(bad.exception.status, 400)
        self.assertTrue(bad.exception.message.startswith("ttlSeconds:"), bad.exception.message)


if __name__ == "__main__":
    unittest.main()
