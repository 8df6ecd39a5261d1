# (rules come with this component)
