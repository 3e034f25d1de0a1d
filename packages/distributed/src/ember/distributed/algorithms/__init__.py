"""`ember.distributed.algorithms`: DDP communication hooks (torch's package layout)."""
