"""dpmcmc: differentially private MCMC in JAX."""
__version__ = "0.1.0"
