"""The trained VLA at run time: camera images, joint state and an instruction in, the next
absolute joint target out.

``VLAPolicy.load(model_dir)`` reads a model directory (no network: the weights are local and
the instruction encoder is the bundled MiniLM). ``act`` predicts a chunk of future actions
every ``query_every`` calls and returns the temporal ensemble of every chunk that covers the
current step (``ensemble``); ``act_chunk`` returns one raw chunk for servers that execute
chunks themselves. A latched network (``VLAConfig.scene_latch``) estimates the scene on its
first call for an instruction and holds it until ``reset`` or a new instruction; its later
calls run the action head alone. Actions are un-normalised and the gripper opening clipped to
0..1; joint limits are the safety layer's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from lang2policy.errors import ConfigError
from lang2policy.vla.model.checkpoint import load_model_dir
from lang2policy.vla.model.grounding import image_fractions, soft_argmax
from lang2policy.vla.model.keyframes import KeyframePlanner, normalize_keyframes, planner_for_robot
from lang2policy.vla.model.language import Encoder, InstructionEmbeddings, encoder_for
from lang2policy.vla.model.network import VLAConfig, VLANet
from lang2policy.vla.model.normalize import Normalizer, images_to_float
from lang2policy.vla.policy.ensemble import DEFAULT_M, TemporalEnsembler
from lang2policy.vla.policy.inputs import check_images, check_instruction, check_state
from lang2policy.vla.spec.schema import STATE_NAMES

GRIPPER = STATE_NAMES.index("gripper")


class VLAPolicy:
    """A trained network with its normaliser, instruction cache and temporal ensembler."""

    def __init__(
        self,
        model: VLANet,
        normalizer: Normalizer,
        language: InstructionEmbeddings,
        *,
        ensemble_m: float = DEFAULT_M,
        query_every: int = 1,
    ) -> None:
        config = model.config
        if not 1 <= query_every <= config.chunk:
            raise ConfigError(
                f"query_every must be 1..{config.chunk} (the chunk length), got {query_every}"
            )
        if language.dim != config.language_dim:
            raise ConfigError(
                f"the instruction embeddings are {language.dim}-d; the model takes "
                f"{config.language_dim}-d ({config.language_model})"
            )
        self.model = model.eval()
        self.normalizer = normalizer
        self.language = language
        self.query_every = query_every
        self.device = next(model.parameters()).device
        self._ensembler = TemporalEnsembler(ensemble_m)
        self._step = 0
        self._instruction: str | None = None
        # where the last forward pass saw the named block and the goal in the front camera
        # (``[2, 2]``: fractions of the image's width and height; None without a grounding head)
        self.last_grounded: np.ndarray | None = None
        # the last forward pass's scene-state estimate (``environment_state``'s units; None
        # without a scene head)
        self.last_scene: np.ndarray | None = None
        # a latched network's held scene state (normalised, ``[1, aux_dim]``) and the
        # instruction it was estimated for (``VLAConfig.scene_latch``)
        self._latched: torch.Tensor | None = None
        self._latched_keyframes: torch.Tensor | None = None
        self._latched_for: str | None = None
        self._planner: KeyframePlanner | None = None

    @classmethod
    def load(
        cls,
        model_dir: Path | str,
        device: str = "cpu",
        threads: int | None = 1,
        *,
        encoder: Encoder | None = None,
        ensemble_m: float = DEFAULT_M,
        query_every: int = 1,
    ) -> VLAPolicy:
        """The policy in ``model_dir``. ``threads`` sets torch's CPU threads (one is fastest
        beside a busy simulation); ``encoder`` replaces the instruction encoder the config names."""
        if threads and device == "cpu":
            torch.set_num_threads(threads)
        loaded = load_model_dir(Path(model_dir), device)
        encode = encoder or encoder_for(loaded.config.language_model)
        language = InstructionEmbeddings(encode, loaded.config.language_dim)
        return cls(
            loaded.model,
            loaded.normalizer,
            language,
            ensemble_m=ensemble_m,
            query_every=query_every,
        )

    @property
    def config(self) -> VLAConfig:
        return self.model.config

    @property
    def cameras(self) -> tuple[str, ...]:
        """The cameras ``act`` takes images of (exactly these)."""
        return tuple(self.config.cameras)

    @property
    def holds_scene(self) -> bool:
        """Whether the network looks once: its scene estimate is of an episode's first frame,
        held (``VLAConfig.scene_latch``)."""
        return self.config.scene_latch

    @property
    def has_looked(self) -> bool:
        """Whether a latched network holds its scene estimate of this episode: it reads no
        image until ``reset`` or a new instruction."""
        return self.config.scene_latch and self._latched is not None

    def warm_up(self, instruction: str = "pick up the block") -> None:
        """Load the instruction encoder and run the network once, so that the first real step
        does not pay for it (the MiniLM load takes seconds)."""
        size = self.config.image_size
        images = {c: np.zeros((size, size, 3), np.uint8) for c in self.config.cameras}
        self.act_chunk(images, np.zeros(self.config.state_dim, np.float32), instruction)
        self.reset()  # a latched network must not keep the blank frame's scene

    def reset(self) -> None:
        """Forget the chunks of the previous episode; call before each new episode."""
        self._ensembler.reset()
        self._step = 0
        self._instruction = None
        self.last_grounded = self.last_scene = None
        self._latched = self._latched_keyframes = self._latched_for = None

    def act(
        self,
        images: Mapping[str, np.ndarray],
        state: np.ndarray,
        instruction: str,
        scene: np.ndarray | None = None,
    ) -> np.ndarray:
        """The joint target ``float32 [action_dim]`` for the next ``1 / fps`` s.

        A new instruction drops the chunks predicted for the old one, so the arm reacts at once.
        ``scene`` (diagnosis only: ``bench vla --true-scene``) is the true scene state
        (``environment_state``) for the action head to read in place of the network's own
        estimate: it tells a perception failure from a motor one.
        """
        inputs = self._check(images, state, instruction)
        if instruction != self._instruction:
            self._ensembler.reset()
            self._instruction = instruction
        self._hold_scene_for(instruction)
        if self._step % self.query_every == 0 or not self._ensembler.covers(self._step):
            self._ensembler.add(self._step, self._predict(*inputs, scene=scene))
        action = self._ensembler.action(self._step)
        self._step += 1
        return self._clip_gripper(action.astype(np.float32))

    def act_chunk(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> np.ndarray:
        """The next ``chunk`` joint targets ``float32 [chunk, action_dim]``, one per
        ``1 / fps`` s (no ensembling; ``act``'s state is left alone, but a latched network
        holds the scene it saw on its first call for this instruction until ``reset``)."""
        inputs = self._check(images, state, instruction)
        self._hold_scene_for(instruction)
        return self._predict(*inputs)

    def _hold_scene_for(self, instruction: str) -> None:
        """A latched network estimates the scene again for a new instruction."""
        if instruction != self._latched_for:
            self._latched, self._latched_keyframes = None, None
            self._latched_for = instruction

    def _check(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Validated inputs: stacked uint8 images, float32 state, instruction vector."""
        config = self.config
        stacked = check_images(images, config.cameras, config.image_size)
        checked_state = check_state(state, config.state_dim)
        return stacked, checked_state, self.language.embed(check_instruction(instruction))

    def _predict(
        self,
        images: np.ndarray,
        state: np.ndarray,
        language: np.ndarray,
        scene: np.ndarray | None = None,
    ) -> np.ndarray:
        """One forward pass: un-normalised actions ``[chunk, action_dim]``, gripper clipped
        (the head reading ``scene``, the true scene state, when given)."""
        with torch.inference_mode():
            image_tensor = images_to_float(torch.from_numpy(images).to(self.device))
            state_tensor = self.normalizer.normalize_state(torch.from_numpy(state).to(self.device))
            language_tensor = torch.from_numpy(language).to(self.device)
            if self.config.scene_latch:  # look once, then the held scene: no images
                if self._latched is None:
                    self._look(image_tensor, state_tensor, language_tensor, scene)
                chunk = self.model.actions_from_scene(
                    state_tensor[None], language_tensor[None], self._latched,
                    self._latched_keyframes,
                )[0]  # fmt: skip
            else:
                chunk, aux, logits = self.model(
                    image_tensor[None], state_tensor[None], language_tensor[None],
                    aux_input=self._true_scene(scene), with_grounding=True,
                )  # fmt: skip
                chunk = chunk[0]
                self._keep_estimates(aux, logits)
        actions = self.normalizer.denormalize_chunk(chunk.float().cpu().numpy(), state)
        return self._clip_gripper(actions.astype(np.float32))

    def _look(
        self, images: torch.Tensor, state: torch.Tensor, language: torch.Tensor,
        scene: np.ndarray | None,
    ) -> None:
        """A latched network's one look: its scene estimate (or the true ``scene``, for
        diagnosis), held with its keyframes until ``reset`` or a new instruction."""
        aux, logits = self.model.perceive(images[None], state[None], language[None])
        self._keep_estimates(aux, logits)
        true_scene = self._true_scene(scene)
        self._latched = true_scene if true_scene is not None else aux
        self._latched_keyframes = None
        if self.config.keyframes:
            held = self._latched[0].float().cpu().numpy()
            raw = held * self.normalizer.env_std + self.normalizer.env_mean
            frames = self._keyframe_planner().keyframes(raw)
            normalized = normalize_keyframes(
                frames, self.normalizer.state_mean, self.normalizer.state_std
            )
            self._latched_keyframes = torch.from_numpy(normalized).to(self.device)[None]

    def _keyframe_planner(self) -> KeyframePlanner:
        """The SO-101's keyframe planner, built on first use (its scene model takes ~1 s)."""
        if self._planner is None:
            self._planner = planner_for_robot("so101")
        return self._planner

    def _true_scene(self, scene: np.ndarray | None) -> torch.Tensor | None:
        """``scene`` normalised for the action head (None: the head reads the estimate)."""
        if scene is None:
            return None
        if self.model.aux_head is None or not self.normalizer.has_environment:
            raise ConfigError("this model has no scene-state head to feed the true scene to")
        scene = np.asarray(scene, np.float32)
        if scene.shape != (self.config.aux_dim,):
            raise ConfigError(f"the scene state must be {self.config.aux_dim} values")
        normalized = self.normalizer.normalize_environment(torch.from_numpy(scene))
        return normalized.to(self.device)[None]

    def _keep_estimates(self, aux: torch.Tensor | None, logits: torch.Tensor | None) -> None:
        """Keep what the network saw: the scene state and the grounded image points."""
        if aux is not None and self.normalizer.has_environment:
            normalized = aux[0].float().cpu().numpy()
            self.last_scene = normalized * self.normalizer.env_std + self.normalizer.env_mean
        if logits is not None:
            points = soft_argmax(logits)[0].float().cpu().numpy()
            self.last_grounded = image_fractions(points, self.config.image_size)

    @staticmethod
    def _clip_gripper(actions: np.ndarray) -> np.ndarray:
        actions[..., GRIPPER] = np.clip(actions[..., GRIPPER], 0.0, 1.0)
        return actions
