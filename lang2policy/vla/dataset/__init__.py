"""Demonstrations as a LeRobotDataset v3.0 directory: written, read back, converted from MCAP.

- ``layout``: the paths and ``meta/info.json``; ``tables``: the parquet tables and their
  column types; ``stats``: ``meta/stats.json``; ``video``: the concatenated MP4s;
- ``record`` + ``writer``: ``DatasetWriter`` takes whole ``EpisodeRecord``s;
- ``meta`` + ``reader``: ``load_meta`` (meta only, checked) and ``load_dataset`` (every frame
  in memory, ``DemoDataset``);
- ``cdr``, ``mcap_episode``, ``resample``, ``from_mcap``: the graph's MCAP recordings
  (one per instruction) turned into episodes (``lang2policy dataset from-mcap``);
- ``merge``: several datasets (``record demos --shard-size``'s shards) merged into one;
- ``summary``: what ``lang2policy dataset info`` prints.
"""

from lang2policy.vla.dataset.from_mcap import convert_recordings, episode_from_mcap
from lang2policy.vla.dataset.layout import CODEBASE_VERSION
from lang2policy.vla.dataset.meta import DatasetMeta, load_meta
from lang2policy.vla.dataset.reader import DemoDataset, load_dataset
from lang2policy.vla.dataset.record import EpisodeRecord
from lang2policy.vla.dataset.summary import summarize
from lang2policy.vla.dataset.video import VideoSettings
from lang2policy.vla.dataset.writer import DatasetWriter

__all__ = [
    "CODEBASE_VERSION",
    "DatasetMeta",
    "DatasetWriter",
    "DemoDataset",
    "EpisodeRecord",
    "VideoSettings",
    "convert_recordings",
    "episode_from_mcap",
    "load_dataset",
    "load_meta",
    "summarize",
]
