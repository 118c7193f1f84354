"""``train rl --executor ray``: the ``--envs`` environment copies as Ray actors, one each.

``RayVecEnv`` is a stable-baselines3 ``VecEnv`` that steps what ``DummyVecEnv`` steps, the same
way: each actor builds its environment from the same factory (and so the same seed) in a Ray
worker process; ``step_async`` sends every action at once and ``step_wait`` gathers the results
in the environments' order into the same buffers (float32 rewards, the observation space's
dtype), with the same auto-reset (``terminal_observation`` and ``TimeLimit.truncated`` in the
step's info, the reset's info kept for ``reset_infos``). A run on Ray therefore learns what a
run in one process learns, weight for weight.

Without an address a loopback-only local Ray cluster is started (``parallel.ray_executor``'s
rules: no dashboard, no usage report) and stopped by ``close``; with one, the run joins that
cluster and leaves it running. Each actor asks for an equal share of the cluster's CPUs (at
most one), so more environments than CPUs still all start. On two cores this is slower than
``DummyVecEnv`` (a round trip per step per environment); it pays off where the environments
have CPUs of their own.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any, SupportsFloat

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)
from stable_baselines3.common.vec_env.util import dict_to_obs, obs_space_info

from lang2policy.errors import Lang2PolicyError
from lang2policy.parallel.ray_executor import connect, import_ray


class EnvActor:
    """One environment in a Ray worker process, stepped and reset as ``DummyVecEnv`` steps and
    resets its own (gymnasium's API in, SB3's out)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        from stable_baselines3.common.vec_env.patch_gym import _patch_env

        self.env = _patch_env(factory())

    def spaces(self) -> tuple[Any, Any]:
        return self.env.observation_space, self.env.action_space

    def step(self, action: np.ndarray) -> tuple[Any, SupportsFloat, bool, dict, dict | None]:
        """One step; at the episode's end the last observation goes into the info and the
        environment is reset (its observation and reset info returned instead)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = terminated or truncated
        info["TimeLimit.truncated"] = truncated and not terminated
        reset_info = None
        if done:
            info["terminal_observation"] = obs
            obs, reset_info = self.env.reset()
        return obs, reward, done, info, reset_info

    def reset(self, seed: int | None, options: dict) -> tuple[Any, dict]:
        return self.env.reset(seed=seed, **({"options": options} if options else {}))

    def get_attr(self, name: str) -> Any:
        return self.env.get_wrapper_attr(name)

    def has_attr(self, name: str) -> bool:
        try:
            self.env.get_wrapper_attr(name)
        except AttributeError:
            return False
        return True

    def set_attr(self, name: str, value: Any) -> None:
        setattr(self.env, name, value)

    def env_method(self, name: str, args: tuple, kwargs: dict) -> Any:
        return self.env.get_wrapper_attr(name)(*args, **kwargs)

    def is_wrapped(self, wrapper_class: type) -> bool:
        from stable_baselines3.common.env_util import is_wrapped

        return is_wrapped(self.env, wrapper_class)

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def actor_cpus(cluster_cpus: float, envs: int) -> float:
    """Each actor's share of the cluster's CPUs: one, or an equal part (4 decimals, what Ray
    keeps) when there are more environments than CPUs."""
    return min(1.0, math.floor(10_000 * cluster_cpus / envs) / 10_000) or 0.0001


class RayVecEnv(VecEnv):
    """``env_fns`` stepped as Ray actors (see the module docstring); ``address``: an existing
    Ray cluster (None: a local one of at most this machine's CPUs, started here)."""

    def __init__(self, env_fns: list[Callable[[], Any]], address: str | None = None) -> None:
        self._ray = import_ray(address)
        self._started = connect(self._ray, address, min(len(env_fns), os.cpu_count() or 1))
        self._actors: list = []
        self.closed = False
        try:
            cpus = actor_cpus(self._ray.cluster_resources().get("CPU", 1), len(env_fns))
            remote = self._ray.remote(num_cpus=cpus)(EnvActor)
            self._actors = [remote.remote(factory) for factory in env_fns]
            observation_space, action_space = self._get(self._actors[0].spaces.remote())
            super().__init__(len(env_fns), observation_space, action_space)
        except BaseException:
            self.close()
            raise
        self.keys, shapes, dtypes = obs_space_info(observation_space)
        self.buf_obs = OrderedDict(
            (key, np.zeros((self.num_envs, *tuple(shapes[key])), dtype=dtypes[key]))
            for key in self.keys
        )
        self.buf_dones = np.zeros((self.num_envs,), dtype=bool)
        self.buf_rews = np.zeros((self.num_envs,), dtype=np.float32)
        self.buf_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._waiting: list = []

    def _get(self, refs: Any) -> Any:
        """``ray.get``; an actor that failed or died is a ``Lang2PolicyError`` saying so."""
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayError as exc:
            raise Lang2PolicyError(f"an environment actor failed on Ray: {exc}") from exc

    def step_async(self, actions: np.ndarray) -> None:
        self._waiting = [actor.step.remote(actions[index])
                         for index, actor in enumerate(self._actors)]  # fmt: skip

    def step_wait(self) -> VecEnvStepReturn:
        results, self._waiting = self._get(self._waiting), []
        for index, (obs, reward, done, info, reset_info) in enumerate(results):
            self.buf_rews[index], self.buf_dones[index], self.buf_infos[index] = reward, done, info
            if done:
                self.reset_infos[index] = reset_info
            self._save_obs(index, obs)
        return (self._obs_from_buf(), np.copy(self.buf_rews), np.copy(self.buf_dones),
                deepcopy(self.buf_infos))  # fmt: skip

    def reset(self) -> VecEnvObs:
        refs = [actor.reset.remote(self._seeds[index], self._options[index])
                for index, actor in enumerate(self._actors)]  # fmt: skip
        for index, (obs, reset_info) in enumerate(self._get(refs)):
            self.reset_infos[index] = reset_info
            self._save_obs(index, obs)
        self._reset_seeds()  # seeds and options are used once, as DummyVecEnv does
        self._reset_options()
        return self._obs_from_buf()

    def close(self) -> None:
        """Close the environments, end the actors, stop the local cluster started here."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(self._ray.exceptions.RayError):  # a dead actor: nothing to close
            self._ray.get([actor.close.remote() for actor in self._actors])
        for actor in self._actors:
            self._ray.kill(actor)
        if self._started:
            self._ray.shutdown()

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(f"The render mode is {self.render_mode}, but this method assumes it "
                          "is `rgb_array` to obtain images.", stacklevel=2)  # fmt: skip
            return [None for _ in self._actors]
        return self._get([actor.render.remote() for actor in self._actors])

    def _save_obs(self, index: int, obs: VecEnvObs) -> None:
        for key in self.keys:
            self.buf_obs[key][index] = obs if key is None else obs[key]  # type: ignore[call-overload]

    def _obs_from_buf(self) -> VecEnvObs:
        return dict_to_obs(self.observation_space, deepcopy(self.buf_obs))

    def _call(self, indices: VecEnvIndices, method: str, *args: Any) -> list[Any]:
        targets = [self._actors[index] for index in self._get_indices(indices)]
        return self._get([getattr(actor, method).remote(*args) for actor in targets])

    def has_attr(self, attr_name: str) -> bool:
        return all(self._call(None, "has_attr", attr_name))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._call(indices, "get_attr", attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._call(indices, "set_attr", attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        return self._call(indices, "env_method", method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return self._call(indices, "is_wrapped", wrapper_class)
