"""Code the tests run in a fresh Python process, as importable modules (not a test package).

Some checks need JAX started in a state the test session cannot give them: several forced host
devices (``XLA_FLAGS=--xla_force_host_platform_device_count`` takes effect only before JAX
starts), ``jax_enable_x64`` off from the start (the suite turns it on), or a persistent
compilation cache in a temporary directory. Their code lives here, one module per test module
(``children/sharding.py`` for ``test_sharding.py``), as plain functions that return a
JSON-serialisable result dict; the test module names them ``"module:function"`` (for example
``HOST_DEVICE_CHILD = "sharding:passes"``), and :mod:`children.runner` runs them in a child
process that JAX starts in the right state (see ``tests/host_devices.py``).

A module here may import JAX and dpmcmc at its top: the runner sets the environment and starts
JAX before it imports any of them. This file imports nothing, so that a child importing one
module (the ledger race's spawned processes) pays for that module alone.
"""
