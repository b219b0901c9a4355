"""The native peers of Fleet's benchmarks, kept out of the fleet package and its wheel.

``_bench`` (built from benchmarks/native/ by the developer build, ``scripts/build.sh``) holds
the gRPC echo peer of ps_throughput.py (``EchoServer``, ``EchoClient``), ``memcpy_seconds`` and
the raw Gloo all-reduce of launch_and_collective.py (``RawGlooGroup``). Benchmarks run from
benchmarks/ import it as ``fleet_bench``; ``python -m fleet_bench.echo_server`` serves an echo
peer as a process of its own.
"""

from fleet_bench._bench import EchoClient, EchoServer, RawGlooGroup, memcpy_seconds

__all__ = ["EchoClient", "EchoServer", "RawGlooGroup", "memcpy_seconds"]
