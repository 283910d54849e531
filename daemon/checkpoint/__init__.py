"""Checkpoints: the engine state of each model *and the input offsets it covers*.

Commit order (the daemon's run loop follows it for every batch):
  1. produce the batch's label records and wait until the broker has them;
  2. write each touched model's checkpoint (state after the batch + next input offset);
  3. commit the consumer offsets (informational: restarts seek to the checkpoint's offsets).
A crash anywhere replays the records after the last checkpoint through the checkpointed state and
random streams, so every replayed answer is byte-identical to the one already published.

Cost is proportional to what changed: a round's classifiers and S-hat are written once per round
(``round-K``), the reservoir D-hat as append-only chunks (``res-K-START``), and counters, RNG states
and offsets as a small ``live`` blob.
"""
