"""GenericBBL, the private everlasting predictor of Naor, Nissim, Stemmer and Yan (2023).

Pure and deterministic given its seed: no Kafka, files, clocks or signals. The daemon feeds it
validated query arrays and persists the state it returns.
"""
