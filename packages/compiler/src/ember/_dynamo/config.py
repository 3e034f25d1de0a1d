"""`ember._dynamo.config`: knobs of the capture (torch._dynamo.config's names)."""

cache_size_limit = 8           # compiled entries per function before it runs eagerly
capture_scalar_outputs = False  # `.item()` stays a graph break (no unbacked symbols yet)
verbose = False
aot_fake_joint = True          # aot_eager traces the joint graph on the capture's fake tensors
#                                (False: on real tensors, running the forward and backward once)
