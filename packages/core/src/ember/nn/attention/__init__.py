"""ember.nn.attention (torch.nn.attention): `flex_attention` lives in its submodule,
`ember.nn.attention.flex_attention`."""
