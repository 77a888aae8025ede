"""Decoding: a FIM model's middle kept completable by the engine's checker.

Rooms, lowest first: :mod:`.tokens` (prompt formats, each token's bytes, the healing index),
:mod:`.masks` (the token-mask store), :mod:`.runtimes` (what runs a model: transformers,
llama.cpp, a model server), :mod:`.models` (which model: the catalogue, fetching, loading, the
confidence gate), :mod:`.loop` (the constrained decode loop and the editor's policy); on top,
:mod:`.model_choice` (one model choice, opened into a decoder) and :mod:`.completion`.
"""
