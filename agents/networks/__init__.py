"""Networks: input embedders per observation name, a quantile embedding, and Q heads."""
