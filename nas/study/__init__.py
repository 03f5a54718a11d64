"""What a study is: its config and checks, objectives, layer-wise mapping, storage."""
