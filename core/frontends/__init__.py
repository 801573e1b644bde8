"""Front ends: each turns a model into the source-graph view the walker reads
(:mod:`oxport.frontends.view`); :mod:`oxport.frontends.exported` reads torch.export's
programs, :mod:`oxport.frontends.torchscript.trace` traces or scripts with TorchScript."""
