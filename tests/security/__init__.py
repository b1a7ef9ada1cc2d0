"""The adversarial suite: hostile code against every real sandbox backend, through the real Bridge."""
