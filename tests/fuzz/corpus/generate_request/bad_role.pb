"

robothi