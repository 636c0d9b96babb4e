"""Ray actors: rollout workers, model servers, the result sink. Ray lives here and in cluster/ only."""
