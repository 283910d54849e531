"""Checkpoints: the engine state of each model *and the input offset it covers*.

The commit order is ``PartitionCheckpoint``'s (``checkpoint.py``, steps numbered there): labels
acknowledged first, then each model's blobs, ``live`` last, then the consumer group's offset
(informational: restarts seek to the checkpoint's offsets). A crash anywhere replays the records
after the last checkpoint through the checkpointed state and random streams, so every replayed
answer is byte-identical to the one already published.

Cost is proportional to what changed (``model_state.py``): a round's classifiers and S-hat are
written once per round (``round-K``), the reservoir D-hat as append-only chunks (``res-K-START``),
and counters, RNG states and offsets as a small ``live`` blob. Stores: a directory or a Kafka topic,
optionally encrypted (``blobs.py``, ``kafka_store.py``).
"""
